"""Savings backtester: workload spec, cluster simulator, metrics, walk-forward and sweeps.

Policies live in :mod:`forecaster.policies`; this package replays them through a simulated
cluster and measures cost and service.
"""
