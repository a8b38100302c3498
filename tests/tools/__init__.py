"""Tests of what ships around the proxy: doctor, the single file, install, deploy, container."""
