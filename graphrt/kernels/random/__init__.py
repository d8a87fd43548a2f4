"""Random generators."""
