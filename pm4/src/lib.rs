//! pm4: packet encoders (placeholder until issue 3 lands).
#![no_std]
