"""The gRPC adapters of the middleware: thin servicers over the pure cores.

Owns the servicers of the project's own services (event, V-Store, actuation,
journal, admin), the conversions between protobuf and the cores' types
(``convert``), the one table from error classes to status codes (``status``),
identity established once per call (``identity``, a server interceptor),
the decoding guard (``decoding``), the calls in progress, which a stopping
server ends in order (``calls``), and what these interceptors share
(``handlers``).

Imports the cores, the runtime and the generated contract; a servicer holds no
logic a test would want without gRPC (that goes in a core or a middleware
module). Must not import the analysis.
"""
