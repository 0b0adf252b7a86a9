bash -c
mpirun
  --allow-run-as-root
  -np 16
  --hostfile /etc/mpi/hostfile
  --map-by ppr:8:node
  --bind-to none
  --mca plm_rsh_args
  '-o StrictHostKeyChecking=no -o UserKnownHostsFile=/dev/null -o LogLevel=ERROR'
  -x NSYSKIT_REPORT_DIR=/reports
  -x NSYSKIT_LAUNCHER=mpirun
  -x NSYSKIT_PROFILE_RANKS=all
  -x NSYSKIT_TRACE=cuda,nvtx,osrt
  -x NSYSKIT_SAMPLE=none
  -x NSYSKIT_PROFILE_DELAY=0
  -x NSYSKIT_PROFILE_DURATION=0
  -x NSYSKIT_CAPTURE=none
  -x NSYSKIT_EFA_METRICS=1
  -x NSYSKIT_EXTRA_ARGS=
  -x NSYSKIT_JOB_ID=golden-all-reduce
  -x NCCL_DEBUG=INFO
  -x NCCL_DEBUG_SUBSYS=INIT,COLL,NET,TUNING
  -x NCCL_DEBUG_TIMESTAMP_LEVELS=WARN,INFO
  -x 'NCCL_DEBUG_TIMESTAMP_FORMAT=[%F_%T.%6f_%z]_'
  -x FI_PROVIDER=efa
  -x FI_EFA_USE_DEVICE_RDMA=1
  -x 'NCCL_SOCKET_IFNAME=^lo,docker'
  -x MASTER_ADDR=worker-0 /usr/local/bin/nsys-profile python3 /nsyskit/workload/rank0tee.py /reports/nccl-tests/all_reduce_perf.out all_reduce_perf
  -b 8
  -e 2G
  -f 2
  -g 1

&&
mpirun
  --allow-run-as-root
  -np 16
  --hostfile /etc/mpi/hostfile
  --map-by ppr:8:node
  --bind-to none
  --mca plm_rsh_args
  '-o StrictHostKeyChecking=no -o UserKnownHostsFile=/dev/null -o LogLevel=ERROR'
  -x NSYSKIT_REPORT_DIR=/reports
  -x NSYSKIT_LAUNCHER=mpirun
  -x NSYSKIT_PROFILE_RANKS=all
  -x NSYSKIT_TRACE=cuda,nvtx,osrt
  -x NSYSKIT_SAMPLE=none
  -x NSYSKIT_PROFILE_DELAY=0
  -x NSYSKIT_PROFILE_DURATION=0
  -x NSYSKIT_CAPTURE=none
  -x NSYSKIT_EFA_METRICS=1
  -x NSYSKIT_EXTRA_ARGS=
  -x NSYSKIT_JOB_ID=golden-all-gather
  -x NCCL_DEBUG=INFO
  -x NCCL_DEBUG_SUBSYS=INIT,COLL,NET,TUNING
  -x NCCL_DEBUG_TIMESTAMP_LEVELS=WARN,INFO
  -x 'NCCL_DEBUG_TIMESTAMP_FORMAT=[%F_%T.%6f_%z]_'
  -x FI_PROVIDER=efa
  -x FI_EFA_USE_DEVICE_RDMA=1
  -x 'NCCL_SOCKET_IFNAME=^lo,docker'
  -x MASTER_ADDR=worker-0 /usr/local/bin/nsys-profile python3 /nsyskit/workload/rank0tee.py /reports/nccl-tests/all_gather_perf.out all_gather_perf
  -b 1M
  -e 1G
  -f 2
