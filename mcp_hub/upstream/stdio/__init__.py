"""Stdio upstreams as processes: started early, read and written without threads."""
