"""Tests of `proxy/shell/upstream`: the model servers, their replicas, profiles and catalog."""
