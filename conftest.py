"""dcblab's pytest set-up: fixtures and hooks live in dcblab.testing.plugin;
the teaching labs (docs/labs/NN-*.md) are collected by
dcblab.testing.labs_pytest; pytester runs inner sessions for the tests of
those hooks."""

pytest_plugins = ["dcblab.testing.plugin", "dcblab.testing.labs_pytest",
                  "pytester"]
