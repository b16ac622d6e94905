mod adapted_top;
mod cross_fit;
