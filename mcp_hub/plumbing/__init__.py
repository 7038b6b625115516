"""Small standard-library helpers with no knowledge of the hub: pipes, batching, debouncing,
processes, replacing a file atomically."""
