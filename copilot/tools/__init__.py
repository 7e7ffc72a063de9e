"""Operating an instance: the health check (doctor) and the calibration of thought confidence."""
