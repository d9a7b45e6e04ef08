"""nn.EmbeddingBag (mean) then a linear layer: Inductor leaves aten._embedding_bag to PyTorch (krefine's lookup family)."""
import torch, torch.nn as nn
class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.bag = nn.EmbeddingBag(30, 8, mode="mean"); self.fc = nn.Linear(8, 4)
    def forward(self, idx):
        return self.fc(self.bag(idx))
def get_inputs(): return [torch.randint(0, 30, (5, 6))]
def get_init_inputs(): return []
