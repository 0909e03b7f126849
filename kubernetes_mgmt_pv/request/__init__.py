"""What an LCM request asks: additionalParams validated into one model,
heal and scale targets."""
