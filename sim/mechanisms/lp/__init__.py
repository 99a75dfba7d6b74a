"""The linear-programming family: the optimal LP and what it is built from.

``optimal`` (``make("lp")``), ``lp_a`` (coarse grid), ``medoids`` (city scale, with a
certified bound: ``certificate``), ``stackelberg`` (against a Bayes-optimal adversary) and
``wem`` (WEM + LP, DistA-LP's server LP); the parts they share: ``solver`` (output and
constraint generation), ``outputs`` (pricing outputs), ``coarse_to_fine`` (warm starts), ``repair``
(an almost-mDP solution made exactly mDP) and ``highs`` (HiGHS settings and helpers).
"""
