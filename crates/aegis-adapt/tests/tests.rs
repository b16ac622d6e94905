mod adapted_top;
