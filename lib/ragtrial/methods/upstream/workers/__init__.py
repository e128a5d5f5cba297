"""Worker scripts run by an upstream system's own interpreter: standard library and that system only."""
