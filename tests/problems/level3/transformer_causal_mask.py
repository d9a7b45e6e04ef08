"""nn.Transformer (one encoder and one decoder layer) given a causal target mask: its layers
compare the mask's values with a causal one to choose a path (`_detect_is_causal_mask`),
a branch on data that Dynamo cannot trace."""
import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.t = nn.Transformer(d_model=16, nhead=2, num_encoder_layers=1, num_decoder_layers=1,
                                dim_feedforward=32, dropout=0.0, batch_first=True)

    def forward(self, src, tgt):
        return self.t(src, tgt, tgt_mask=self.t.generate_square_subsequent_mask(tgt.shape[1], device=tgt.device))


def get_inputs():
    return [torch.randn(2, 6, 16), torch.randn(2, 5, 16)]


def get_init_inputs():
    return []
