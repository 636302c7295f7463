//! kfdrt runtime (placeholder until issue 5 lands).
