"""The edge: what an A2A call is (:mod:`apcore_a2a.edge.call`), built once per call on every
binding, and read by every layer after it."""
