"""dcblab's pytest set-up: fixtures and hooks live in dcblab.pytest_plugin."""

pytest_plugins = ["dcblab.pytest_plugin"]
