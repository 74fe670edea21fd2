// Replaced as the stage lands.
