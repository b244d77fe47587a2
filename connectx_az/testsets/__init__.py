"""Pascal Pons' test sets, their loading and scoring (numpy only), below both training and evaluation."""
