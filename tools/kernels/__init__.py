"""krefine's own Triton kernel library: one file per operation family, each standing alone
(torch and triton only) so a seed can carry its text into `best.py` unchanged.

conv.py   forward (1-D/2-D/3-D) and transposed convolution with a fused epilogue.
"""
