"""The execution bridge: A2A requests in, apcore module runs, A2A events out."""
