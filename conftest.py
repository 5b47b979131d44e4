"""dcblab's pytest set-up: fixtures and hooks live in dcblab.testing.plugin;
pytester runs inner sessions for the tests of those hooks."""

pytest_plugins = ["dcblab.testing.plugin", "pytester"]
