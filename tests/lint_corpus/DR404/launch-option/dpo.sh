trl dpo --model_name_or_path Qwen/Qwen2-0.5B-Instruct --dataset_name trl-lib/ultrafeedback_binarized \
  --accelerate_config zero3 --num_process 4 --output_dir dpo-out
