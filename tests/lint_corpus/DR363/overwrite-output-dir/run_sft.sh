lr=1e-4
per_device_train_batch_size=1
gradient_accumulation_steps=8
torchrun --nnodes 1 --nproc_per_node 1 run_clm_sft_with_peft.py \
    --model_name_or_path path/to/llama \
    --per_device_train_batch_size ${per_device_train_batch_size} \
    --do_train \
    --fp16 \
    --learning_rate ${lr} \
    --save_strategy steps \
    --eval_steps 100 \
    --gradient_accumulation_steps ${gradient_accumulation_steps} \
    --output_dir output_dir \
    --overwrite_output_dir \
    --ddp_timeout 30000
