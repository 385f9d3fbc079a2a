"""The reports of a labelled set: label sources side by side (`compare`), summaries of any record
file and the bill (`stats`), Best-of-N with a PRM's scores (`bon`) and the aggregates of step scores
(`aggregates`), labels beyond the first error (`recovery`), the HTML report (`html`) and the rich
tables they print (`tables`). What is measured against gold is `prm_annotate.evaluation`'s."""
