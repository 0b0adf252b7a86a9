"""Every task of the kit in one Invoke collection: what tasks.py (in a checkout) and the `nsyskit` command both run."""

from invoke import Collection

from nsyskit.cli import (
    analyze_tasks,
    config_tasks,
    demo_tasks,
    deploy_tasks,
    image_tasks,
    k8s_tasks,
    nccl_tasks,
    registry_tasks,
    run_tasks,
    slurm_tasks,
    test_tasks,
)

ns = Collection(
    config_tasks.show_config,
    config_tasks.init,
    config_tasks.setup,
    test_tasks.test,
    image_tasks.build,
    registry_tasks.login,
    registry_tasks.push,
    registry_tasks.pull,
    deploy_tasks.deploy,
    deploy_tasks.undeploy,
    deploy_tasks.status,
    deploy_tasks.logs,
    deploy_tasks.collect,
    slurm_tasks.enroot_credentials,
    slurm_tasks.enroot_import,
    k8s_tasks.k8s_setup,
    nccl_tasks.nccl_log,
    nccl_tasks.nccl_tests,
    analyze_tasks.analyze,
    analyze_tasks.analyze_part,
    analyze_tasks.analyze_merge,
    analyze_tasks.recipes,
    run_tasks.run,
    run_tasks.exec_,
    run_tasks.stop,
    demo_tasks.demo,
)
