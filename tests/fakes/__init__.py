"""Stand-ins for cloud services and CLIs that tests cannot reach; they run commands for real."""
