"""A Hugging Face Trainer script as users write it: a small GPT-2 from a config (random weights), synthetic tokens,
gradient accumulation; nothing of any profiler. Run by torchrun on CPU (gloo) or GPUs."""

import argparse

import torch
from transformers import GPT2Config, GPT2LMHeadModel, Trainer, TrainingArguments

parser = argparse.ArgumentParser()
parser.add_argument("--steps", type=int, default=8)
parser.add_argument("--output", default="/tmp/hf-out")
args = parser.parse_args()


class Tokens(torch.utils.data.Dataset):
    def __len__(self):
        return 4096

    def __getitem__(self, index):
        ids = torch.randint(0, 512, (64,), generator=torch.Generator().manual_seed(index))
        return {"input_ids": ids, "labels": ids}


model = GPT2LMHeadModel(GPT2Config(vocab_size=512, n_positions=64, n_embd=64, n_layer=2, n_head=2))
training = TrainingArguments(output_dir=args.output, max_steps=args.steps, per_device_train_batch_size=4,
                             gradient_accumulation_steps=2, logging_steps=1, save_strategy="no", report_to=[],
                             use_cpu=not torch.cuda.is_available(), dataloader_num_workers=0)
Trainer(model=model, args=training, train_dataset=Tokens()).train()
