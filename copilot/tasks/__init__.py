"""What the copilot writes for a user beyond answers: drafts, trends and ideas, the profile, refreshes, warm-up."""
