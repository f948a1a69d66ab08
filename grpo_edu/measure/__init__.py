"""What the course measures, one job per module; imports only go down (to the loop and the core)."""
