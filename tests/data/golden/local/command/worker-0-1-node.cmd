python3
  -m torch.distributed.run
  --standalone
  --nnodes 1
  --nproc-per-node 8
  --no-python /usr/local/bin/nsys-profile python3 /code/train.py
  --lr 3e-4
  --name 'my run'
