int torch_tpu_placeholder = 0;
