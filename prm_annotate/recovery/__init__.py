"""Recovery: labels beyond the first error, every slip of a trace and whether and where it is
corrected (docs/recovery.md).

- `labels`: what a recovery label is (`Recovery`, `Slip`), its JSON form read strictly, and the
  step labels it gives; the records read it, so it imports nothing of the package.
- `rules`: MC's reading of slips from the soft scores (`rollout --recovery-rule`, RECOVERY_RULES).
- `consensus`: MC's reading and the judge's combined (`consensus --rule recovery`): kept when they
  agree, else the row that says how they differ.
- `report`: where a record keeps its recovery, counts of slips and corrections (`stats`), and two
  sources' agreement on them (`compare`, `evaluate`).

The judge's reading is a judge protocol and answer style (judging/slips.py: `--protocol recovery`,
`--style slips`), registered with the others in judging/; the recovery consensus rule is registered
in stages/consensus.py's CONSENSUS_RULES. Importing `labels` runs this file first, so it imports
nothing.
"""
