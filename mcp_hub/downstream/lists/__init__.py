"""List answers served from prepared, cached and compressed bytes."""
