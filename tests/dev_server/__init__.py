"""End-to-end tests that run lunaflow in real processes."""
