"""The planning engine: the rolling history window, the served model and its process-pool
planner, the refresher that publishes immutable snapshots, policy drift and the service's
metrics."""
