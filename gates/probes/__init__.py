"""Probe scripts copied onto a lane host and run there with the lane's interpreter (stdlib only)."""
