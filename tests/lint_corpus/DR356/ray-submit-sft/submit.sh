ray job submit --address=http://127.0.0.1:8265 -- \
    python3 -m verl.trainer.fsdp_sft_trainer \
    data.train_batch_size=256 \
    data.micro_batch_size_per_gpu=4 \
    trainer.total_epochs=1
