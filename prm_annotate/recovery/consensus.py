"""MC's and the judge's readings of slips combined (`consensus --rule recovery`, registered with the
other rules in stages/consensus.py's CONSENSUS_RULES): a response is kept when both name the same
slips corrected at the same steps; otherwise its row of the rule's table says how they differ."""
from __future__ import annotations

from prm_annotate.evaluation.labels import SAME, UNPARSED
from prm_annotate.recovery.labels import Recovery

# Rows of the recovery rule's table (consensus --rule recovery): MC's and the judge's slips.
SLIPS_DIFFER, CORRECTIONS_DIFFER = "slips differ", "corrections differ"
RECOVERY_ROWS = (SAME, SLIPS_DIFFER, CORRECTIONS_DIFFER, UNPARSED)


def recovery_row(mc: Recovery, judge: Recovery | None) -> str:
    """The row of a pair of `Recovery` readings (None: the judge's is unparsed): the same slips
    corrected at the same steps, other slips, or the same slips corrected elsewhere (or not)."""
    if judge is None:
        return UNPARSED
    if mc == judge:
        return SAME
    if [s.step for s in mc.slips] != [s.step for s in judge.slips]:
        return SLIPS_DIFFER
    return CORRECTIONS_DIFFER
