"""Training and measuring tools of the arithmetic world (`prm_annotate.world` holds what the demo runs)."""
