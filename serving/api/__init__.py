"""The service's endpoints: the FastAPI app and its routes, the gRPC scaler, authentication and
the runtime they share."""
