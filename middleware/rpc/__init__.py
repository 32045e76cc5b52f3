"""The gRPC adapters of the middleware: thin servicers over the pure cores."""
