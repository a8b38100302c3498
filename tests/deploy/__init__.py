"""Tests of the shipped deployment files in `deploy/` (and the Dockerfile)."""
