"""Tests of the example projects under examples/, run through LocalPlatform."""
