"""Operations: health, metrics, telemetry, graceful shutdown."""
