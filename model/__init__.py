"""Model-side pieces that know nothing of torchtitan (attention backends)."""
