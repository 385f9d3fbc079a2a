"""A PRM as a reward for reinforcement learning: step rewards and their aggregate through `score`'s
machinery (`scoring`), the requests of OpenRLHF's remote reward model and this server's own form
(`protocols`), the HTTP server (`server`), and verl's reward-function shape (`verl`)."""
from prm_annotate.reward.protocols import BadRequest, TextRules
from prm_annotate.reward.scoring import AGGREGATES, DEFAULT_AGGREGATE, Item, Reward, RewardScorer
from prm_annotate.reward.server import RewardServer, ServerConfig

__all__ = ["AGGREGATES", "DEFAULT_AGGREGATE", "BadRequest", "Item", "Reward", "RewardScorer", "RewardServer",
           "ServerConfig", "TextRules"]
