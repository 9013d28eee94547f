"""Wire formats: Kubernetes API objects and quantities, label selectors, KEDA scaler messages
and their generated gRPC stubs, and the reply bodies encoded from a snapshot."""
