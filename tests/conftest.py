"""Fixtures shared by every test directory. Keep this file small: fixtures live in
tests/fixtures/, one module per concept, and are registered here."""

pytest_plugins = ["fixtures.sshd", "fixtures.netns"]
